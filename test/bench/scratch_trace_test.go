package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

func BenchmarkScratchTrace(b *testing.B) {
	s := newStage(b, env.Options{})
	var log []byte
	for run := 0; run < 4; run++ {
		img := fmt.Sprintf("registry.example/web:trace-%d", run)
		cmd := exec.Command("/tmp/kgo-trace", "breakglass", "web", "deployment/web", "--image", "web="+img, "--reason", "bench", "-y")
		cmd.Env = append(os.Environ(), "KGO_TRACE=1", "KUBECONFIG="+s.e.Kubeconfig(env.Oncall.Name), "PATH="+filepath.Dir(s.plugin)+":"+os.Getenv("PATH"))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		log = append(log, []byte(fmt.Sprintf("=== run %d (%v) err=%v\n", run, time.Since(start), err))...)
		log = append(log, out...)
		s.run(b, s.plugin, "restore", "web", "--force", "--reason", "bench reset", "-y")
		s.waitImage(b, env.FixtureImage, time.Minute)
	}
	os.WriteFile("/tmp/trace.txt", log, 0o644)
}
