package telemetry

import (
	"errors"

	dto "github.com/prometheus/client_model/go"
)

// Gather returns the metrics' current values, as /metrics serves them, for
// the operator console: an error when the registry given to NewMetrics
// gathers nothing (it is not a prometheus.Gatherer).
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	if m == nil || m.gatherer == nil {
		return nil, errors.New("telemetry: no gatherer")
	}
	return m.gatherer.Gather()
}
