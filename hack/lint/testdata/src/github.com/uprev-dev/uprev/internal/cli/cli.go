package cli

import _ "github.com/uprev-dev/uprev/internal/fleet"
