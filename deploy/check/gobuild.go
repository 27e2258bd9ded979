package check

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// GoBuild is a `go build` of a Dockerfile stage, with what the stage
// copied from the build context before it.
type GoBuild struct {
	Line int
	// Packages are the build's package arguments ("./cmd/gateway").
	Packages []string
	// Copies are the stage's COPY instructions from the context, in order,
	// each source relative to the context and destination relative to the
	// stage's WORKDIR.
	Copies []Copy
}

// Copy is one source of a COPY instruction.
type Copy struct {
	Src, Dst string
	// ToDir reports whether Dst is a directory (it ends in "/" or ".", or
	// the instruction has several sources).
	ToDir bool
}

// GoBuilds returns the `go build` commands of a Dockerfile's RUN
// instructions.
func GoBuilds(ins []Instruction) ([]GoBuild, error) {
	var out []GoBuild
	var copies []Copy
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			copies = nil
		case "WORKDIR":
		case "COPY", "ADD":
			if _, ok := in.Flags["from"]; ok || len(in.Args) < 2 {
				continue
			}
			srcs, dst := in.Args[:len(in.Args)-1], in.Args[len(in.Args)-1]
			if path.IsAbs(dst) {
				return nil, fmt.Errorf("line %d: %s to an absolute path: this check only follows paths relative to WORKDIR", in.Line, in.Cmd)
			}
			for _, s := range srcs {
				copies = append(copies, Copy{Src: s, Dst: dst, ToDir: len(srcs) > 1 || strings.HasSuffix(dst, "/") || dst == "."})
			}
		case "RUN":
			i := indexPair(in.Args, "go", "build")
			if i < 0 {
				continue
			}
			b := GoBuild{Line: in.Line, Copies: append([]Copy(nil), copies...)}
			for _, a := range in.Args[i+2:] {
				if strings.HasPrefix(a, "./") {
					b.Packages = append(b.Packages, a)
				}
			}
			out = append(out, b)
		}
	}
	return out, nil
}

func indexPair(s []string, a, b string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == a && s[i+1] == b {
			return i
		}
	}
	return -1
}

// CheckGoBuild reproduces what a Dockerfile's `go build` sees: it copies
// the stage's COPY sources from the context (minus what .dockerignore
// excludes) into dir, then lists the build's packages and all their
// dependencies there, offline and with go.sum as it is. A package the
// COPYs leave out, a missing go.sum entry or an embed pattern that matches
// nothing is a problem. Nothing is compiled.
func CheckGoBuild(contextDir, dockerfile, dir string) ([]string, error) {
	ins, err := readDockerfile(dockerfile)
	if err != nil {
		return nil, err
	}
	builds, err := GoBuilds(ins)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dockerfile, err)
	}
	ignore, err := loadDockerignore(contextDir, dockerfile)
	if err != nil {
		return nil, err
	}
	var problems []string
	for n, b := range builds {
		root := filepath.Join(dir, fmt.Sprint(n))
		for _, c := range b.Copies {
			if err := copyFromContext(contextDir, c, root, ignore); err != nil {
				return nil, err
			}
		}
		if len(b.Packages) == 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: go build names no ./package", dockerfile, b.Line))
			continue
		}
		args := append([]string{"list", "-e", "-deps", "-f", "{{with .Error}}{{.}}{{end}}{{range .DepsErrors}}{{.}}{{end}}"}, b.Packages...)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		// Offline, with the module files as copied: what the image build
		// gets after `go mod download`.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off", "GOWORK=off", "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		// A package's error can show twice: as its own and as a
		// dependent's.
		lines := slices.Compact(slices.Sorted(slices.Values(strings.Split(strings.TrimSpace(string(out)), "\n"))))
		if msg := strings.Join(lines, "\n"); err != nil || msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: go build %s would fail with only what the stage copies:\n%s", dockerfile, b.Line, strings.Join(b.Packages, " "), msg))
		}
	}
	return problems, nil
}

// copyFromContext copies one COPY source into root as the Dockerfile
// would (directories by content), skipping excluded files.
func copyFromContext(contextDir string, c Copy, root string, ignore interface {
	MatchesOrParentMatches(string) (bool, error)
}) error {
	src := path.Clean(strings.TrimPrefix(c.Src, "/"))
	from := filepath.Join(contextDir, filepath.FromSlash(src))
	fi, err := os.Stat(from)
	if err != nil {
		return nil // CheckDockerfile reports missing sources
	}
	dst := filepath.Join(root, filepath.FromSlash(c.Dst))
	if !fi.IsDir() {
		if c.ToDir {
			dst = filepath.Join(dst, filepath.Base(from))
		}
		return copyFile(from, dst)
	}
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(contextDir, p)
		if ignore != nil {
			if excluded, err := ignore.MatchesOrParentMatches(filepath.ToSlash(rel)); err != nil {
				return err
			} else if excluded {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		within, _ := filepath.Rel(from, p)
		return copyFile(p, filepath.Join(dst, within))
	})
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
