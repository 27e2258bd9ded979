package check

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Names the manifests and this check agree on.
const (
	GatewayDeployment = "mcp-gateway"
	GatewayContainer  = "gateway"
	MCPPortName       = "mcp"
	AdminPortName     = "admin"
	ReadinessPath     = "/readyz"
	LivenessPath      = "/healthz"
)

// Expect is what one rendered kustomization must provide beyond the
// invariants every one of them meets.
type Expect struct {
	// MinReplicas bounds the gateway Deployment's replicas and the HPA's
	// minReplicas from below.
	MinReplicas int32
	// ExternalSecrets are Secrets referenced but created outside the
	// manifests (from a secret store), by name.
	ExternalSecrets []string
}

// GatewayConfig is the gateway's config as one rendered kustomization
// deploys it.
type GatewayConfig struct {
	// Data is the config file's content, from the ConfigMap.
	Data string
	// Env is the gateway container's environment, with a placeholder for
	// values from Secrets that are not rendered.
	Env map[string]string
	// Source names the ConfigMap and key, for messages.
	Source string
	// MCPPort and AdminPort are the container's ports of those names.
	MCPPort, AdminPort int32
}

// CheckObjects checks the invariants of one rendered kustomization and
// returns every problem found, and the gateway's config as deployed (zero
// if the gateway Deployment is missing).
func CheckObjects(objs []Object, want Expect) ([]string, GatewayConfig) {
	c := &checker{want: want, byKind: map[string]map[string]Object{}}
	for _, o := range objs {
		if c.byKind[o.Kind] == nil {
			c.byKind[o.Kind] = map[string]Object{}
		}
		if _, dup := c.byKind[o.Kind][o.Name]; dup {
			c.addf("%s: rendered twice", o)
		}
		c.byKind[o.Kind][o.Name] = o
		if !clusterScoped[o.Kind] && o.Namespace == "" {
			c.addf("%s: no namespace: it would land in the kubectl context's namespace (set namespace: in the kustomization)", o)
		}
	}
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *appsv1.Deployment:
			c.deployment(o, v)
		case *corev1.Service:
			c.service(o, v)
		case *policyv1.PodDisruptionBudget:
			c.pdb(o, v)
		case *autoscalingv2.HorizontalPodAutoscaler:
			c.hpa(o, v)
		case *ServiceMonitor:
			c.serviceMonitor(o, v)
		}
	}
	gw := c.gateway()
	return c.problems, gw
}

type checker struct {
	want     Expect
	byKind   map[string]map[string]Object
	problems []string
}

func (c *checker) addf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *checker) deployments() []*appsv1.Deployment {
	var ds []*appsv1.Deployment
	for _, o := range c.byKind["Deployment"] {
		ds = append(ds, o.Value.(*appsv1.Deployment))
	}
	return ds
}

// deployment checks what every Deployment must meet: a selector that
// selects its pods, a restrictive security context, resources, pinned
// images, and references that resolve.
func (c *checker) deployment(o Object, d *appsv1.Deployment) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		c.addf("%s: spec.selector is empty or invalid", o)
	} else if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		c.addf("%s: spec.selector does not select the pod template's labels", o)
	}
	c.podSpec(o.String(), &d.Spec.Template.Spec)
}

// podSpec checks a pod template against the "restricted" Pod Security
// Standard and our own rules.
func (c *checker) podSpec(where string, ps *corev1.PodSpec) {
	psc := ps.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		c.addf("%s: uses host namespaces", where)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		c.addf("%s: automountServiceAccountToken must be false (no container here calls the Kubernetes API)", where)
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			c.addf("%s: volume %q is a hostPath", where, v.Name)
		}
	}
	containers := slices.Concat(ps.InitContainers, ps.Containers)
	for i := range containers {
		ct := &containers[i]
		at := fmt.Sprintf("%s: container %q", where, ct.Name)
		sc := ct.SecurityContext
		if sc == nil {
			c.addf("%s: no securityContext", at)
			sc = &corev1.SecurityContext{}
		}
		if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
			c.addf("%s: runAsNonRoot is not true", at)
		}
		if uid := firstNonNil(sc.RunAsUser, psc.RunAsUser); uid != nil && *uid == 0 {
			c.addf("%s: runAsUser is 0", at)
		}
		if !isFalse(sc.AllowPrivilegeEscalation) {
			c.addf("%s: allowPrivilegeEscalation is not false", at)
		}
		if isTrue(sc.Privileged) {
			c.addf("%s: privileged", at)
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			c.addf("%s: readOnlyRootFilesystem is not true", at)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			c.addf("%s: capabilities.drop does not hold ALL", at)
		} else if len(sc.Capabilities.Add) > 0 {
			c.addf("%s: adds capabilities %v", at, sc.Capabilities.Add)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
			c.addf("%s: seccompProfile is not RuntimeDefault (or Localhost)", at)
		}
		r := ct.Resources
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := r.Requests[name]; !ok {
				c.addf("%s: no %s request", at, name)
			}
		}
		if _, ok := r.Limits[corev1.ResourceMemory]; !ok {
			c.addf("%s: no memory limit", at)
		}
		if p := ImageProblem(ct.Image); p != "" {
			c.addf("%s: image %q: %s", at, ct.Image, p)
		}
		c.envRefs(at, ct)
	}
	for _, v := range ps.Volumes {
		switch {
		case v.ConfigMap != nil:
			c.ref(where+": volume "+strconv.Quote(v.Name), "ConfigMap", v.ConfigMap.Name, "", isTrue(v.ConfigMap.Optional))
		case v.Secret != nil:
			c.ref(where+": volume "+strconv.Quote(v.Name), "Secret", v.Secret.SecretName, "", isTrue(v.Secret.Optional))
		}
	}
}

// envRefs checks that the Secrets and ConfigMaps a container's environment
// names are rendered (or external) and hold the keys.
func (c *checker) envRefs(at string, ct *corev1.Container) {
	for _, e := range ct.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			c.ref(at+": env "+e.Name, "Secret", r.Name, r.Key, isTrue(r.Optional))
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			c.ref(at+": env "+e.Name, "ConfigMap", r.Name, r.Key, isTrue(r.Optional))
		}
	}
	for _, e := range ct.EnvFrom {
		if r := e.SecretRef; r != nil {
			c.ref(at+": envFrom", "Secret", r.Name, "", isTrue(r.Optional))
		}
		if r := e.ConfigMapRef; r != nil {
			c.ref(at+": envFrom", "ConfigMap", r.Name, "", isTrue(r.Optional))
		}
	}
}

// ref checks one reference to a Secret or ConfigMap, and its key if not
// "".
func (c *checker) ref(at, kind, name, key string, optional bool) {
	o, ok := c.byKind[kind][name]
	if !ok {
		if kind == "Secret" && slices.Contains(c.want.ExternalSecrets, name) || optional {
			return
		}
		c.addf("%s: %s %q is not rendered (nor declared external)", at, kind, name)
		return
	}
	if key == "" {
		return
	}
	var has bool
	switch v := o.Value.(type) {
	case *corev1.Secret:
		_, has = v.Data[key]
		if !has {
			_, has = v.StringData[key]
		}
	case *corev1.ConfigMap:
		_, has = v.Data[key]
	}
	if !has && !optional {
		c.addf("%s: %s %q has no key %q", at, kind, name, key)
	}
}

// gateway checks the gateway Deployment: its probes, the config mount and
// the config's ports, and returns the config as deployed.
func (c *checker) gateway() GatewayConfig {
	o, ok := c.byKind["Deployment"][GatewayDeployment]
	if !ok {
		c.addf("Deployment %q is not rendered", GatewayDeployment)
		return GatewayConfig{}
	}
	d := o.Value.(*appsv1.Deployment)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < c.want.MinReplicas {
		c.addf("%s: replicas below %d", o, c.want.MinReplicas)
	}
	ps := &d.Spec.Template.Spec
	i := slices.IndexFunc(ps.Containers, func(ct corev1.Container) bool { return ct.Name == GatewayContainer })
	if i < 0 {
		c.addf("%s: no container %q", o, GatewayContainer)
		return GatewayConfig{}
	}
	ct := &ps.Containers[i]
	at := fmt.Sprintf("%s: container %q", o, ct.Name)

	gw := GatewayConfig{Env: map[string]string{}}
	for _, p := range ct.Ports {
		switch p.Name {
		case MCPPortName:
			gw.MCPPort = p.ContainerPort
		case AdminPortName:
			gw.AdminPort = p.ContainerPort
		}
	}
	if gw.MCPPort == 0 || gw.AdminPort == 0 {
		c.addf("%s: needs container ports named %q and %q", at, MCPPortName, AdminPortName)
	}
	c.probe(at, "readinessProbe", ct.ReadinessProbe, ReadinessPath, gw.AdminPort)
	c.probe(at, "livenessProbe", ct.LivenessProbe, LivenessPath, gw.AdminPort)
	if a := d.Spec.Template.Annotations; a["prometheus.io/scrape"] == "true" && a["prometheus.io/port"] != strconv.Itoa(int(gw.AdminPort)) {
		c.addf("%s: annotation prometheus.io/port %q is not the admin port %d", o, a["prometheus.io/port"], gw.AdminPort)
	}

	// The config: -config FILE, in a directory mounted whole from a
	// ConfigMap that holds FILE's base name.
	args := slices.Concat(ct.Command, ct.Args)
	j := slices.Index(args, "-config")
	if j < 0 || j+1 >= len(args) {
		c.addf("%s: no -config FILE in command or args", at)
		return gw
	}
	file := args[j+1]
	dir, base := path.Split(file)
	dir = path.Clean(dir)
	mi := slices.IndexFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Clean(m.MountPath) == dir })
	if mi < 0 {
		c.addf("%s: nothing is mounted at %s, the directory of -config %s", at, dir, file)
		return gw
	}
	m := ct.VolumeMounts[mi]
	if m.SubPath != "" || m.SubPathExpr != "" {
		c.addf("%s: the config volume is mounted with a subPath, which never sees ConfigMap updates: mount the directory", at)
	}
	if !m.ReadOnly {
		c.addf("%s: the config volume is not mounted readOnly", at)
	}
	vi := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
	if vi < 0 || ps.Volumes[vi].ConfigMap == nil {
		c.addf("%s: the volume mounted at %s is not a ConfigMap volume", at, dir)
		return gw
	}
	vcm := ps.Volumes[vi].ConfigMap
	if len(vcm.Items) > 0 {
		c.addf("%s: the config volume selects items; mount the whole ConfigMap", at)
	}
	cmObj, ok := c.byKind["ConfigMap"][vcm.Name]
	if !ok {
		return gw // reported by podSpec
	}
	data, ok := cmObj.Value.(*corev1.ConfigMap).Data[base]
	if !ok {
		c.addf("%s: has no key %q, the file -config names", cmObj, base)
		return gw
	}
	gw.Data = data
	gw.Source = fmt.Sprintf("%s key %s", cmObj, base)

	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			gw.Env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			gw.Env[e.Name] = "placeholder-from-secret"
			if s, ok := c.byKind["Secret"][e.ValueFrom.SecretKeyRef.Name]; ok {
				gw.Env[e.Name] = string(s.Value.(*corev1.Secret).Data[e.ValueFrom.SecretKeyRef.Key])
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm, ok := c.byKind["ConfigMap"][e.ValueFrom.ConfigMapKeyRef.Name]; ok {
				gw.Env[e.Name] = cm.Value.(*corev1.ConfigMap).Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
		default:
			gw.Env[e.Name] = "placeholder-from-field"
		}
	}
	if len(ct.EnvFrom) > 0 {
		c.addf("%s: envFrom is not supported by this check: list each variable under env", at)
	}

	cfg, err := ParseServerConfig([]byte(data))
	if err != nil {
		c.addf("%s: %v", gw.Source, err)
		return gw
	}
	if p := portOf(cfg.Listen); p != gw.MCPPort {
		c.addf("%s: server.listen %q is not the container port %q (%d)", gw.Source, cfg.Listen, MCPPortName, gw.MCPPort)
	}
	if p := portOf(cfg.AdminListen); p != gw.AdminPort {
		c.addf("%s: server.admin_listen %q is not the container port %q (%d)", gw.Source, cfg.AdminListen, AdminPortName, gw.AdminPort)
	}
	if host, _, _ := net.SplitHostPort(cfg.AdminListen); host != "" && host != "0.0.0.0" && host != "::" {
		c.addf("%s: server.admin_listen %q listens on %s only: kubelet probes and scrapes come to the pod IP", gw.Source, cfg.AdminListen, host)
	}
	return gw
}

// probe checks that p is an HTTP GET of path on the admin port.
func (c *checker) probe(at, what string, p *corev1.Probe, wantPath string, adminPort int32) {
	switch {
	case p == nil:
		c.addf("%s: no %s", at, what)
	case p.HTTPGet == nil:
		c.addf("%s: %s is not an httpGet", at, what)
	case p.HTTPGet.Path != wantPath:
		c.addf("%s: %s path is %q, want %q", at, what, p.HTTPGet.Path, wantPath)
	case !portIs(p.HTTPGet.Port, AdminPortName, adminPort):
		c.addf("%s: %s port is %s, want the admin port (%q, %d)", at, what, p.HTTPGet.Port.String(), AdminPortName, adminPort)
	}
}

// selects reports whether sel is a valid non-empty selector that selects
// at least one rendered Deployment's pods, and which.
func (c *checker) selects(sel *metav1.LabelSelector) (string, bool) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return "", false
	}
	for _, d := range c.deployments() {
		if s.Matches(labels.Set(d.Spec.Template.Labels)) {
			return d.Name, true
		}
	}
	return "", false
}

func (c *checker) service(o Object, s *corev1.Service) {
	name, ok := c.selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
	if !ok {
		c.addf("%s: selects no rendered Deployment's pods", o)
		return
	}
	d := c.byKind["Deployment"][name].Value.(*appsv1.Deployment)
	for _, p := range s.Spec.Ports {
		if !containerHasPort(d.Spec.Template.Spec.Containers, p.TargetPort, p.Port) {
			c.addf("%s: port %q targets %s, which no container of Deployment %s declares", o, p.Name, p.TargetPort.String(), name)
		}
	}
}

func (c *checker) pdb(o Object, p *policyv1.PodDisruptionBudget) {
	if _, ok := c.selects(p.Spec.Selector); !ok {
		c.addf("%s: selects no rendered Deployment's pods", o)
	}
	if p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil {
		c.addf("%s: sets neither minAvailable nor maxUnavailable", o)
	}
}

func (c *checker) hpa(o Object, h *autoscalingv2.HorizontalPodAutoscaler) {
	t := h.Spec.ScaleTargetRef
	if t.Kind != "Deployment" || t.APIVersion != "apps/v1" {
		c.addf("%s: scaleTargetRef is not an apps/v1 Deployment", o)
	} else if _, ok := c.byKind["Deployment"][t.Name]; !ok {
		c.addf("%s: scaleTargetRef names Deployment %q, which is not rendered", o, t.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < c.want.MinReplicas {
		c.addf("%s: minReplicas below %d", o, c.want.MinReplicas)
	} else if h.Spec.MaxReplicas < *h.Spec.MinReplicas {
		c.addf("%s: maxReplicas below minReplicas", o)
	}
	if t.Name == GatewayDeployment {
		if d, ok := c.byKind["Deployment"][t.Name]; ok {
			for _, ct := range d.Value.(*appsv1.Deployment).Spec.Template.Spec.Containers {
				if _, ok := ct.Resources.Requests[corev1.ResourceCPU]; !ok {
					c.addf("%s: container %q has no CPU request, which CPU utilization is measured against", o, ct.Name)
				}
			}
		}
	}
}

func (c *checker) serviceMonitor(o Object, sm *ServiceMonitor) {
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		c.addf("%s: spec.selector is empty or invalid", o)
		return
	}
	var ports []string
	for _, so := range c.byKind["Service"] {
		s := so.Value.(*corev1.Service)
		if sel.Matches(labels.Set(s.Labels)) {
			for _, p := range s.Spec.Ports {
				ports = append(ports, p.Name)
			}
		}
	}
	if len(ports) == 0 {
		c.addf("%s: selects no rendered Service (by the Services' labels)", o)
		return
	}
	for _, e := range sm.Spec.Endpoints {
		if !slices.Contains(ports, e.Port) {
			c.addf("%s: endpoint port %q is no port name of the selected Services %v", o, e.Port, ports)
		}
	}
}

// ImageProblem returns what is wrong with an image reference, or "": it
// must name a tag other than "latest", or a digest.
func ImageProblem(image string) string {
	if image == "" {
		return "empty"
	}
	if strings.Contains(image, "@sha256:") {
		return ""
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	i := strings.LastIndex(name, ":")
	switch {
	case i < 0:
		return "no tag: it means latest"
	case name[i+1:] == "latest":
		return "tag latest: pin a version"
	case strings.Contains(name[i+1:], "$"):
		return "tag is a variable"
	}
	return ""
}

// portIs reports whether p is the port named name or the number num.
func portIs(p intstr.IntOrString, name string, num int32) bool {
	if p.Type == intstr.String {
		return p.StrVal == name
	}
	return num != 0 && p.IntVal == num
}

// containerHasPort reports whether a container declares target (a port
// name or number; an unset target means the Service port's number).
func containerHasPort(cs []corev1.Container, target intstr.IntOrString, servicePort int32) bool {
	if target.Type == intstr.Int && target.IntVal == 0 {
		target = intstr.FromInt32(servicePort)
	}
	for _, ct := range cs {
		for _, p := range ct.Ports {
			if portIs(target, p.Name, p.ContainerPort) {
				return true
			}
		}
	}
	return false
}

// portOf returns the port of a host:port address, or 0.
func portOf(addr string) int32 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

func firstNonNil[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}
