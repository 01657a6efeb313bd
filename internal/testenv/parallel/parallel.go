// Package parallel lets a test package whose parallel tests mostly wait
// (on servers that answer slowly or never, on deadlines, on a manager's
// next run) run them all at once. go test runs as many parallel tests at
// once as the machine has cores (-parallel), which for waiting tests
// leaves the cores idle.
package parallel

import (
	"flag"
	"strconv"
)

// AtLeast raises go test's -parallel to n, unless the command line gave
// it. A TestMain calls it before m.Run.
func AtLeast(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if given || f == nil {
		return
	}
	if now, err := strconv.Atoi(f.Value.String()); err == nil && now >= n {
		return
	}
	_ = f.Value.Set(strconv.Itoa(n)) // an int flag takes any decimal
}
