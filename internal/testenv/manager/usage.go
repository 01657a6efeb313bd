package manager

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux ABI.
const userHZ = 100

// Usage is what the manager process has used so far.
type Usage struct {
	// RSSKiB is the resident set size now, in KiB.
	RSSKiB int
	// PeakRSSKiB is the largest resident set size so far (VmHWM), in KiB.
	PeakRSSKiB int
	// CPU is the user and system CPU time spent so far.
	CPU time.Duration
	// SystemCPU is the part of CPU spent in the kernel (system calls:
	// files, sockets).
	SystemCPU time.Duration
}

// statusField matches one "Name:   1234 kB" line of /proc/<pid>/status.
var statusField = regexp.MustCompile(`(?m)^(VmRSS|VmHWM):\s+(\d+) kB$`)

// Usage reads the manager's memory and CPU time from /proc.
func (p *Process) Usage() (Usage, error) {
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("reading the manager's memory: %w", err)
	}
	var u Usage
	for _, m := range statusField.FindAllSubmatch(status, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		if string(m[1]) == "VmRSS" {
			u.RSSKiB = n
		} else {
			u.PeakRSSKiB = n
		}
	}
	if u.RSSKiB == 0 || u.PeakRSSKiB == 0 {
		return Usage{}, fmt.Errorf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("reading the manager's CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from 1 start after its closing parenthesis, with the state
	// (field 3); utime and stime are fields 14 and 15.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 13 {
		return Usage{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("reading CPU times of /proc/%d/stat: %q %q", pid, fields[11], fields[12])
	}
	u.CPU = time.Duration(utime+stime) * time.Second / userHZ
	u.SystemCPU = time.Duration(stime) * time.Second / userHZ
	return u, nil
}
