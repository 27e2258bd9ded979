package check

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Line int
	// Cmd is the instruction upper-cased: FROM, COPY, ...
	Cmd string
	// Flags are the leading --name=value flags (COPY --from=build ...).
	Flags map[string]string
	// Args are the remaining words, or the JSON array's items.
	Args []string
}

// ParseDockerfile splits a Dockerfile into instructions. It understands
// comments, parser directives, backslash continuations and the JSON
// (exec) form; not heredocs or a changed escape character, which the
// repository's Dockerfiles do not use.
func ParseDockerfile(r io.Reader) ([]Instruction, error) {
	var out []Instruction
	sc := bufio.NewScanner(r)
	var cur strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(trimmed)
		in, err := parseInstruction(start, cur.String())
		if err != nil {
			return nil, err
		}
		out = append(out, in)
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: continuation at end of file", start)
	}
	return out, nil
}

// readDockerfile parses the Dockerfile at path. A syntax error names the
// file.
func readDockerfile(path string) ([]Instruction, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ins, err := ParseDockerfile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ins, nil
}

func parseInstruction(line int, s string) (Instruction, error) {
	cmd, rest, _ := strings.Cut(s, " ")
	in := Instruction{Line: line, Cmd: strings.ToUpper(cmd), Flags: map[string]string{}}
	rest = strings.TrimSpace(rest)
	// Flags come first for FROM, COPY, ADD, RUN.
	for strings.HasPrefix(rest, "--") {
		var flag string
		flag, rest, _ = strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		in.Flags[k] = v
		rest = strings.TrimSpace(rest)
	}
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &in.Args); err == nil {
			return in, nil
		}
	}
	in.Args = strings.Fields(rest)
	return in, nil
}

// CheckDockerfile checks a Dockerfile built with contextDir as its
// context: every base image is pinned by tag (or digest), and every COPY
// or ADD source from the context exists and is not excluded by the
// .dockerignore that applies (<Dockerfile>.dockerignore next to the
// Dockerfile, else .dockerignore at the context's root).
func CheckDockerfile(contextDir, dockerfile string) ([]string, error) {
	ins, err := readDockerfile(dockerfile)
	if err != nil {
		return nil, err
	}
	ignore, err := loadDockerignore(contextDir, dockerfile)
	if err != nil {
		return nil, err
	}

	var problems []string
	addf := func(in Instruction, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", dockerfile, in.Line, in.Cmd, fmt.Sprintf(format, args...)))
	}
	stages := map[string]bool{}
	sawFrom := false
	for _, in := range ins {
		switch in.Cmd {
		case "FROM":
			sawFrom = true
			if len(in.Args) == 0 {
				addf(in, "no image")
				continue
			}
			image := in.Args[0]
			if len(in.Args) == 3 && strings.EqualFold(in.Args[1], "AS") {
				stages[strings.ToLower(in.Args[2])] = true
			}
			if image == "scratch" || stages[strings.ToLower(image)] {
				continue
			}
			if p := ImageProblem(image); p != "" {
				addf(in, "base image %q: %s", image, p)
			}
		case "COPY", "ADD":
			if !sawFrom {
				addf(in, "before FROM")
			}
			if _, ok := in.Flags["from"]; ok {
				continue // from a stage or an image, not the context
			}
			if len(in.Args) < 2 {
				addf(in, "needs a source and a destination")
				continue
			}
			for _, src := range in.Args[:len(in.Args)-1] {
				if strings.Contains(src, "$") || strings.Contains(src, "://") {
					continue
				}
				rel := path.Clean(strings.TrimPrefix(src, "/"))
				matches, _ := filepath.Glob(filepath.Join(contextDir, filepath.FromSlash(rel)))
				if len(matches) == 0 {
					addf(in, "source %q does not exist in the build context %s", src, contextDir)
					continue
				}
				if ignore != nil {
					if excluded, err := ignore.MatchesOrParentMatches(rel); err != nil {
						return nil, err
					} else if excluded {
						addf(in, "source %q is excluded from the build context by .dockerignore", src)
					}
				}
			}
		}
	}
	if !sawFrom {
		problems = append(problems, dockerfile+": no FROM")
	}
	return problems, nil
}

// loadDockerignore returns the exclusion patterns of a build, or nil if
// there are none.
func loadDockerignore(contextDir, dockerfile string) (*patternmatcher.PatternMatcher, error) {
	for _, p := range []string{dockerfile + ".dockerignore", filepath.Join(contextDir, ".dockerignore")} {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		patterns, err := ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return patternmatcher.New(patterns)
	}
	return nil, nil
}
