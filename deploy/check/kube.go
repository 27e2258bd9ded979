package check

import (
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Object is one rendered Kubernetes object, decoded into its Go type.
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// Value is a pointer to the typed object: *appsv1.Deployment,
	// *corev1.Service, *ServiceMonitor, ...
	Value any
}

// String names the object as kubectl does: Kind/namespace/name.
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// kinds maps apiVersion/kind to a new value of its Go type. An object of a
// kind not listed here is an error: add its type when the manifests start
// using it.
var kinds = map[string]func() any{
	"v1/Namespace":                            func() any { return new(corev1.Namespace) },
	"v1/ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                               func() any { return new(corev1.Secret) },
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(ServiceMonitor) },
}

// clusterScoped lists the kinds above that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true}

// Render builds the kustomization in dir with the kustomize Go API (as
// `kubectl kustomize dir` does) and decodes every object strictly.
func Render(dir string) ([]Object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []Object
	var errs []error
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.CurId(), err))
			continue
		}
		o, err := DecodeJSON(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.CurId(), err))
			continue
		}
		objs = append(objs, o)
	}
	return objs, errors.Join(errs...)
}

// DecodeYAML decodes one object from YAML, strictly: see [DecodeJSON].
func DecodeYAML(data []byte) (Object, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return Object{}, err
	}
	return DecodeJSON(j)
}

// DecodeJSON decodes one object into the Go type of its apiVersion and
// kind, as strictly as the API server's strict field validation: an unknown
// field, a field spelt in another case or a duplicate field is an error.
func DecodeJSON(data []byte) (Object, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return Object{}, err
	}
	newValue, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return Object{}, fmt.Errorf("apiVersion %q kind %q: not a known type (add it to kinds in deploy/check/kube.go)", tm.APIVersion, tm.Kind)
	}
	v := newValue()
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if len(strict) > 0 {
		return Object{}, fmt.Errorf("%s: %w", tm.Kind, errors.Join(strict...))
	}
	meta, ok := v.(metav1.Object)
	if !ok {
		return Object{}, fmt.Errorf("%s: %T has no object metadata", tm.Kind, v)
	}
	if meta.GetName() == "" {
		return Object{}, fmt.Errorf("%s: metadata.name is empty", tm.Kind)
	}
	return Object{APIVersion: tm.APIVersion, Kind: tm.Kind, Name: meta.GetName(), Namespace: meta.GetNamespace(), Value: v}, nil
}

// ServiceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) that the manifests use. A field not declared
// here fails the strict decode: add it, spelt as in the CRD's schema
// (https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor).
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ServiceMonitorSpec `json:"spec"`
}

// ServiceMonitorSpec is the used part of a ServiceMonitor's spec.
type ServiceMonitorSpec struct {
	JobLabel          string                 `json:"jobLabel,omitempty"`
	Selector          metav1.LabelSelector   `json:"selector"`
	NamespaceSelector *NamespaceSelector     `json:"namespaceSelector,omitempty"`
	Endpoints         []ServiceMonitorTarget `json:"endpoints"`
}

// NamespaceSelector selects the namespaces of a ServiceMonitor's Services.
type NamespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// ServiceMonitorTarget is one scraped endpoint of a ServiceMonitor.
type ServiceMonitorTarget struct {
	Port          string `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool   `json:"honorLabels,omitempty"`
}
