package env

import (
	"errors"
	"slices"
	"testing"
)

// A component that starts long after its ports were chosen may find one
// taken (an outgoing connection was given it): it is started again on
// fresh ports, and only for that; other failures are not retried.
func TestRetryBindTakesFreshPortsOnlyWhenABindFailed(t *testing.T) {
	var tried [][]int
	err := retryBind(3, []int{1, 2}, func(p []int) error {
		tried = append(tried, p)
		if len(tried) == 1 {
			return errors.New("argocd-commit-server exited before it was ready; last log lines:\nlisten tcp 127.0.0.1:1: bind: address already in use")
		}
		return nil
	})
	if err != nil || len(tried) != 2 || slices.Equal(tried[1], tried[0]) || tried[1][0] == tried[1][1] {
		t.Fatalf("err %v, tried %v", err, tried)
	}
	tried = nil
	err = retryBind(3, []int{1, 2}, func(p []int) error { tried = append(tried, p); return errors.New("no such binary") })
	if err == nil || len(tried) != 1 {
		t.Errorf("another failure: %v after %d tries", err, len(tried))
	}
	tried = nil
	err = retryBind(3, []int{1, 2}, func(p []int) error { tried = append(tried, p); return errors.New("bind: address already in use") })
	if err == nil || len(tried) != 3 {
		t.Errorf("always taken: %v after %d tries", err, len(tried))
	}
}
