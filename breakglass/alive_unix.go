//go:build !windows

package breakglass

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive is whether process pid of this host still runs. A zombie
// (killed, not yet reaped) runs no more.
func processAlive(pid int) bool {
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) STATE ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) {
			return stat[i+2] != 'Z' && stat[i+2] != 'X'
		}
		return true
	} else if _, procErr := os.Stat("/proc/self/stat"); procErr == nil {
		return false // a /proc without this pid: it has ended
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
