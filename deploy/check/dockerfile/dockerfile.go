package dockerfile

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Instructions splits a Dockerfile into instructions, joining continued
// lines and dropping comments and blank lines.
func Instructions(text string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// Want is what the rest of the repository expects of the Dockerfile.
type Want struct {
	// Modules are the directories go.work uses, relative to the root
	// ("pkg", "services/edge", ...).
	Modules []string
	// UID the image runs as; the manifests' runAsUser.
	UID int64
	// Port the image exposes; the manifests' container port.
	Port int32
}

// Check returns every way the Dockerfile text breaks the contract.
func Check(text string, want Want) error {
	ins := Instructions(text)
	has := func(re string) bool {
		r := regexp.MustCompile(re)
		return slices.ContainsFunc(ins, r.MatchString)
	}
	var errs []error
	for _, re := range []string{
		`^FROM golang:1\.27 AS build$`,
		`^ARG SERVICE$`,
		`^ENV .*\bCGO_ENABLED=1\b`,
		`^ENV .*\bGOTOOLCHAIN=go1\.27\.3\b`,
		`^RUN go build -trimpath -ldflags="-s -w" -o \S+ "\./services/\$\{SERVICE\}/cmd/\$\{SERVICE\}"$`,
		`^FROM gcr\.io/distroless/base-debian12:nonroot$`,
		fmt.Sprintf(`^USER %d:%d$`, want.UID, want.UID),
		fmt.Sprintf(`^EXPOSE %d$`, want.Port),
	} {
		if !has(re) {
			errs = append(errs, fmt.Errorf("no instruction matches %s", re))
		}
	}
	if len(ins) == 0 || !regexp.MustCompile(`^ENTRYPOINT \["/\S+"\]$`).MatchString(ins[len(ins)-1]) {
		errs = append(errs, errors.New(`the final stage does not end with ENTRYPOINT ["/<binary>"]`))
	}

	var download string
	for _, in := range ins {
		if strings.Contains(in, "go mod download") {
			download = in + " "
		}
	}
	for _, dir := range want.Modules {
		copied := has(`^COPY ` + regexp.QuoteMeta(dir) + `/go\.mod `)
		dropped := has(`-dropuse=\./` + regexp.QuoteMeta(dir) + `(\s|$)`)
		switch {
		case !copied && !dropped:
			errs = append(errs, fmt.Errorf("go.work uses %s, which is neither copied (COPY %s/go.mod) nor dropped (go work edit -dropuse=./%s)", dir, dir, dir))
		case copied && !regexp.MustCompile(`\s`+regexp.QuoteMeta(dir)+`[\s;]`).MatchString(download):
			errs = append(errs, fmt.Errorf("%s/go.mod is copied but its modules are not downloaded", dir))
		}
	}
	return errors.Join(errs...)
}
