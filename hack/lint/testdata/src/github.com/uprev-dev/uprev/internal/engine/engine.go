package engine

import (
	_ "github.com/uprev-dev/uprev/controllers"      // want `engines: internal/engine/engine.go may not import github.com/uprev-dev/uprev/controllers`
	_ "github.com/uprev-dev/uprev/internal/cli"     // want `engines: internal/engine/engine.go may not import github.com/uprev-dev/uprev/internal/cli`
	_ "github.com/uprev-dev/uprev/internal/fleet"   // want `read-model: internal/engine/engine.go may not import`
	_ "github.com/uprev-dev/uprev/internal/testenv" // want `production: internal/engine/engine.go may not import`
)
