//go:build !windows

package audit

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f until it is closed.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
}
