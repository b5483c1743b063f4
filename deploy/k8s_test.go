package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The parts of the Kubernetes objects that k8s/ uses and the test checks.
type k8sMeta struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a port name
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type k8sContainer struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string         `yaml:"name"`
		Value     string         `yaml:"value"`
		ValueFrom map[string]any `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	Lifecycle      struct {
		PreStop struct {
			Exec struct {
				Command []string `yaml:"command"`
			} `yaml:"exec"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
}

type k8sDeployment struct {
	k8sMeta `yaml:",inline"`
	Spec    struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	k8sMeta `yaml:",inline"`
	Spec    struct {
		Selector        map[string]string `yaml:"selector"`
		SessionAffinity string            `yaml:"sessionAffinity"`
		Ports           []struct {
			Port       int `yaml:"port"`
			TargetPort any `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPDB struct {
	k8sMeta `yaml:",inline"`
	Spec    struct {
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

func decodeK8s(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("k8s", "base", file))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	require.NoError(t, dec.Decode(v), file)
}

// env returns the value of the container's environment variable name.
func (c k8sContainer) env(name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// port resolves a probe or Service port (a number or a container port's
// name) to the container port number; 0 if it names none.
func (c k8sContainer) port(p any) int {
	switch v := p.(type) {
	case int:
		return v
	case string:
		for _, cp := range c.Ports {
			if cp.Name == v {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

func TestK8sManifests(t *testing.T) {
	t.Parallel()
	var d k8sDeployment
	decodeK8s(t, "deployment.yaml", &d)
	require.Equal(t, "Deployment", d.Kind)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	labels := d.Spec.Template.Metadata.Labels
	assert.Equal(t, d.Spec.Selector.MatchLabels, labels, "the Deployment selects its own pods")
	assert.GreaterOrEqual(t, d.Spec.Replicas, 2, "more than one node, or a drain is an outage")

	// Every CHATD_* variable is a real flag's environment twin.
	config, err := os.ReadFile(filepath.Join("..", "cmd", "chatd", "config.go"))
	require.NoError(t, err)
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "CHATD_") {
			assert.Contains(t, string(config), strconv.Quote(e.Name), "%s is one of chatd's flags' twins", e.Name)
		}
	}
	for _, secret := range []string{"CHATD_SECRET", "CHATD_ADMIN_TOKEN"} {
		v, ok := c.env(secret)
		require.True(t, ok, "%s is set", secret)
		assert.Empty(t, v, "%s comes from a Secret, not the manifest", secret)
	}
	_, ok := c.env("CHATD_REDIS")
	assert.True(t, ok, "CHATD_REDIS is set: without it chatd runs an embedded single-node Redis")

	t.Run("probes reach the port chatd listens on", func(t *testing.T) {
		addr, ok := c.env("CHATD_ADDR")
		require.True(t, ok, "CHATD_ADDR is set (the default :8080 would also do, but say it)")
		_, portStr, found := strings.Cut(addr, ":")
		require.True(t, found, "CHATD_ADDR %q is [host]:port", addr)
		listen, err := strconv.Atoi(portStr)
		require.NoError(t, err)
		assert.Equal(t, listen, c.port("http"))
		require.NotNil(t, c.ReadinessProbe)
		require.NotNil(t, c.LivenessProbe)
		assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, "readiness includes Redis, the bus and draining")
		assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, "liveness must not depend on Redis")
		assert.Equal(t, listen, c.port(c.ReadinessProbe.HTTPGet.Port))
		assert.Equal(t, listen, c.port(c.LivenessProbe.HTTPGet.Port))
		if c.StartupProbe != nil {
			assert.Equal(t, listen, c.port(c.StartupProbe.HTTPGet.Port))
		}
		server, err := os.ReadFile(filepath.Join("..", "web", "server.go"))
		require.NoError(t, err)
		for _, p := range []string{"/readyz", "/healthz"} {
			assert.Contains(t, string(server), strconv.Quote(p), "web serves %s", p)
		}
	})

	t.Run("the grace period covers preStop and the drain", func(t *testing.T) {
		cmd := c.Lifecycle.PreStop.Exec.Command
		require.Len(t, cmd, 2, "preStop is sleep N")
		require.Equal(t, "sleep", cmd[0])
		pre, err := strconv.Atoi(cmd[1])
		require.NoError(t, err)
		graceStr, ok := c.env("CHATD_SHUTDOWN_GRACE")
		require.True(t, ok, "CHATD_SHUTDOWN_GRACE is set, so the manifest and the drain agree by construction")
		grace, err := time.ParseDuration(graceStr)
		require.NoError(t, err)
		term := time.Duration(d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
		assert.Greater(t, term, time.Duration(pre)*time.Second+grace,
			"terminationGracePeriodSeconds %v exceeds preStop %ds + --shutdown-grace %v, or SIGKILL cuts the drain", term, pre, grace)
		readyGone := time.Duration(c.ReadinessProbe.PeriodSeconds*c.ReadinessProbe.FailureThreshold) * time.Second
		assert.GreaterOrEqual(t, time.Duration(pre)*time.Second, readyGone,
			"preStop outlasts the readiness probe's reaction, so endpoints are gone before the drain")
	})

	t.Run("service and disruption budget select the pods", func(t *testing.T) {
		var s k8sService
		decodeK8s(t, "service.yaml", &s)
		assert.Equal(t, "Service", s.Kind)
		assert.Equal(t, labels, s.Spec.Selector)
		assert.Contains(t, []string{"", "None"}, s.Spec.SessionAffinity, "no sticky sessions")
		require.Len(t, s.Spec.Ports, 1, "the public port only: never the metrics port")
		assert.Equal(t, c.port("http"), c.port(s.Spec.Ports[0].TargetPort))

		var p k8sPDB
		decodeK8s(t, "pdb.yaml", &p)
		assert.Equal(t, "PodDisruptionBudget", p.Kind)
		assert.Equal(t, labels, p.Spec.Selector.MatchLabels)
		assert.Equal(t, 1, p.Spec.MaxUnavailable)
		assert.Nil(t, p.Spec.MinAvailable)
	})
}
