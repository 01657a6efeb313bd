package demo

import "github.com/go-logr/logr"

// logrDiscard keeps the manager's logs out of the demo's output.
func logrDiscard() logr.Logger { return logr.Discard() }
