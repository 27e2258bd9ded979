package check

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kustomizations lists every kustomization under deploy/kubernetes with
// what it must provide. A new one must be added here.
var kustomizations = map[string]Expect{
	"base":                {MinReplicas: 3, ExternalSecrets: []string{"mcp-gateway-secrets"}},
	"overlays/dev":        {MinReplicas: 1},
	"overlays/production": {MinReplicas: 3, ExternalSecrets: []string{"mcp-gateway-secrets"}},
}

// kustomizationFile is the part of a kustomization.yaml this test reads.
type kustomizationFile struct {
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Components []string `yaml:"components"`
}

// findKustomizations returns every kustomization.yaml under
// deploy/kubernetes, by directory relative to it.
func findKustomizations(t *testing.T) map[string]kustomizationFile {
	t.Helper()
	root := repoPath("deploy/kubernetes")
	found := map[string]kustomizationFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var k kustomizationFile
		if err := yaml.Unmarshal(data, &k); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		found[filepath.ToSlash(rel)] = k
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestKustomizations(t *testing.T) {
	found := findKustomizations(t)
	usedComponents := map[string]bool{}
	for dir, k := range found {
		switch k.Kind {
		case "Kustomization", "":
			if _, ok := kustomizations[dir]; !ok {
				t.Errorf("deploy/kubernetes/%s: a kustomization this check does not know: add it to kustomizations in kube_test.go", dir)
			}
			for _, c := range k.Components {
				usedComponents[path.Clean(path.Join(dir, c))] = true
			}
		case "Component":
		default:
			t.Errorf("deploy/kubernetes/%s: unknown kind %q", dir, k.Kind)
		}
	}
	// Components cannot render alone: each must be used by a rendered
	// kustomization, so that CI renders and decodes it.
	for dir, k := range found {
		if k.Kind == "Component" && !usedComponents[dir] {
			t.Errorf("deploy/kubernetes/%s: component used by no kustomization listed in kube_test.go, so never checked", dir)
		}
	}

	for dir, want := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			if _, ok := found[dir]; !ok {
				t.Fatalf("deploy/kubernetes/%s/kustomization.yaml does not exist", dir)
			}
			objs, err := Render(repoPath("deploy/kubernetes/" + dir))
			if err != nil {
				t.Fatal(err)
			}
			problems, gw := CheckObjects(objs, want)
			for _, p := range problems {
				t.Error(p)
			}
			if gw.Data == "" {
				return
			}
			t.Run("gateway validate", func(t *testing.T) {
				validateConfig(t, gw.Source, "gateway.yaml", gw.Data, gw.Env)
			})
		})
	}
}

// TestDecodeIsStrict shows that the decoding catches what a cluster's
// strict field validation would reject.
func TestDecodeIsStrict(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: c
          image: i:1
`
	tests := []struct {
		name string
		yaml string
	}{
		{"unknown field", strings.Replace(deployment, "image: i:1", "image: i:1\n          readinesProbe: {}", 1)},
		{"field in another case", strings.Replace(deployment, "image: i:1", "Image: i:1", 1)},
		{"duplicate field", strings.Replace(deployment, "image: i:1", "image: i:1\n          image: i:2", 1)},
		{"wrong type", strings.Replace(deployment, "image: i:1", "image: i:1\n          ports: 8080", 1)},
		{"bad quantity", strings.Replace(deployment, "image: i:1", "image: i:1\n          resources: {requests: {cpu: lots}}", 1)},
		{"unknown kind", strings.Replace(deployment, "kind: Deployment", "kind: Deploymnet", 1)},
		{"unknown ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  endpoints: [{port: admin, intervall: 30s}]\n"},
	}
	if _, err := DecodeYAML([]byte(deployment)); err != nil {
		t.Fatalf("the valid Deployment: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeYAML([]byte(tt.yaml)); err == nil {
				t.Errorf("decoded without error:\n%s", tt.yaml)
			}
		})
	}
}

// TestCheckObjectsFindsProblems breaks the rendered base one way at a time
// and expects the invariants to say so.
func TestCheckObjectsFindsProblems(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment, c *corev1.Container)
		want   string
	}{
		{"subPath config mount", func(_ *appsv1.Deployment, c *corev1.Container) {
			c.VolumeMounts[0].SubPath = "gateway.yaml"
		}, "subPath"},
		{"latest image", func(_ *appsv1.Deployment, c *corev1.Container) { c.Image = "ghcr.io/mcpgw/gateway:latest" }, "tag latest"},
		{"untagged image", func(_ *appsv1.Deployment, c *corev1.Container) { c.Image = "ghcr.io/mcpgw/gateway" }, "no tag"},
		{"readiness on the MCP port", func(_ *appsv1.Deployment, c *corev1.Container) {
			c.ReadinessProbe.HTTPGet.Port = intstr.FromString("mcp")
		}, "readinessProbe port"},
		{"liveness on /readyz", func(_ *appsv1.Deployment, c *corev1.Container) { c.LivenessProbe.HTTPGet.Path = "/readyz" }, "livenessProbe path"},
		{"no readiness probe", func(_ *appsv1.Deployment, c *corev1.Container) { c.ReadinessProbe = nil }, "no readinessProbe"},
		{"writable root", func(_ *appsv1.Deployment, c *corev1.Container) {
			c.SecurityContext.ReadOnlyRootFilesystem = nil
		}, "readOnlyRootFilesystem"},
		{"privilege escalation", func(_ *appsv1.Deployment, c *corev1.Container) {
			c.SecurityContext.AllowPrivilegeEscalation = nil
		}, "allowPrivilegeEscalation"},
		{"capabilities kept", func(_ *appsv1.Deployment, c *corev1.Container) { c.SecurityContext.Capabilities = nil }, "drop does not hold ALL"},
		{"no seccomp", func(d *appsv1.Deployment, c *corev1.Container) {
			c.SecurityContext.SeccompProfile = nil
			d.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"may run as root", func(d *appsv1.Deployment, c *corev1.Container) {
			c.SecurityContext.RunAsNonRoot = nil
			d.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
		}, "runAsNonRoot"},
		{"no memory limit", func(_ *appsv1.Deployment, c *corev1.Container) { delete(c.Resources.Limits, corev1.ResourceMemory) }, "no memory limit"},
		{"unknown secret", func(_ *appsv1.Deployment, c *corev1.Container) {
			c.Env[0].ValueFrom.SecretKeyRef.Name = "typo-secrets"
		}, `Secret "typo-secrets" is not rendered`},
		{"config elsewhere", func(_ *appsv1.Deployment, c *corev1.Container) {
			i := slices.Index(c.Args, "-config")
			c.Args[i+1] = "/etc/other/gateway.yaml"
		}, "nothing is mounted at /etc/other"},
		{"config key missing", func(_ *appsv1.Deployment, c *corev1.Container) {
			i := slices.Index(c.Args, "-config")
			c.Args[i+1] = "/etc/mcp-gateway/config.yaml"
		}, `no key "config.yaml"`},
		{"too few replicas", func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Replicas = new(int32(1)) }, "replicas below 3"},
		{"admin port renamed", func(_ *appsv1.Deployment, c *corev1.Container) { c.Ports[1].Name = "metrics" }, `named "mcp" and "admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Render(repoPath("deploy/kubernetes/base"))
			if err != nil {
				t.Fatal(err)
			}
			want := kustomizations["base"]
			if problems, _ := CheckObjects(objs, want); len(problems) > 0 {
				t.Fatalf("the base has problems before breaking it: %v", problems)
			}
			i := slices.IndexFunc(objs, func(o Object) bool { return o.Kind == "Deployment" && o.Name == GatewayDeployment })
			d := objs[i].Value.(*appsv1.Deployment)
			tt.mutate(d, &d.Spec.Template.Spec.Containers[0])
			problems, _ := CheckObjects(objs, want)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("no problem mentions %q; got %q", tt.want, problems)
			}
		})
	}
}

func TestImageProblem(t *testing.T) {
	tests := []struct {
		image string
		ok    bool
	}{
		{"ghcr.io/mcpgw/gateway:0.1.0", true},
		{"localhost:5000/gateway:dev", true},
		{"gateway@sha256:0123", true},
		{"localhost:5000/gateway", false},
		{"redis", false},
		{"redis:latest", false},
		{"golang:${GO_VERSION}", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ImageProblem(tt.image) == ""; got != tt.ok {
			t.Errorf("ImageProblem(%q) = %q, want ok=%v", tt.image, ImageProblem(tt.image), tt.ok)
		}
	}
}
