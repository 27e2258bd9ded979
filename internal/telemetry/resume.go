package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a stream resumed with Last-Event-ID: the values of the
// outcome label of mcpgw_stream_resumes_total.
const (
	ResumeOK      = "ok"
	ResumeUnknown = "unknown" // no such event in this session's log: unknown, expired, or another session's
	ResumeGone    = "gone"    // the events after it were dropped to keep the log's bounds
)

var resumeOutcomes = set(ResumeOK, ResumeUnknown, ResumeGone)

// resumeMetrics are the metrics of resumable streams.
type resumeMetrics struct {
	resumes  *prometheus.CounterVec
	detached prometheus.Gauge
}

func newResumeMetrics(reg prometheus.Registerer) resumeMetrics {
	r := resumeMetrics{
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgw_stream_resumes_total",
			Help: "GET requests with Last-Event-ID that resumed a stream, by outcome.",
		}, []string{"outcome"}),
		detached: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpgw_detached_calls",
			Help: "Calls of this replica that go on, their events logged, after their client hung up.",
		}),
	}
	reg.MustRegister(r.resumes, r.detached)
	return r
}

// StreamResumed records a GET with Last-Event-ID: mcpgw_stream_resumes_total.
func (m *Metrics) StreamResumed(outcome string) {
	if m == nil {
		return
	}
	if !resumeOutcomes[outcome] {
		outcome = otherLabel
	}
	m.resume.resumes.WithLabelValues(outcome).Inc()
}

// CallDetached adds delta to mcpgw_detached_calls.
func (m *Metrics) CallDetached(delta int) {
	if m != nil {
		m.resume.detached.Add(float64(delta))
	}
}
