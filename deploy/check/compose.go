package check

import (
	"context"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads a Compose file as `docker compose config` does, with
// compose-go, the library docker compose is built on: it is validated
// against the Compose Specification's schema (an unknown key is an error),
// anchors, merge keys and x-* extensions are resolved, relative paths are
// made absolute, and references between services (depends_on,
// network_mode: service:...) must name services. Variables are
// interpolated from env only, not from the process's environment or a
// .env file, so that the result does not depend on who runs the check.
func LoadCompose(ctx context.Context, file string, env []string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithName("check"),
		cli.WithEnv(env),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(ctx)
}
