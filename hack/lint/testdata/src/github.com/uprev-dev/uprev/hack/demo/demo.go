package demo

import (
	_ "github.com/uprev-dev/uprev/internal/fleet"
	_ "github.com/uprev-dev/uprev/internal/testenv"
)
