package dockerfile

import (
	"strings"
	"testing"
)

const good = `# syntax=docker/dockerfile:1
FROM golang:1.27 AS build
ENV CGO_ENABLED=1 GOTOOLCHAIN=go1.27.3
COPY go.work ./
COPY pkg/go.mod pkg/go.su[m] pkg/
COPY services/web/go.mod services/web/
RUN go work edit -dropuse=./e2e \
 && for m in pkg services/web; do \
      (cd "$m" && GOWORK=off go mod download) || exit 1; \
    done
COPY . .
ARG SERVICE
RUN go build -trimpath -ldflags="-s -w" -o /out/app "./services/${SERVICE}/cmd/${SERVICE}"
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/app /app
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/app"]
`

var want = Want{Modules: []string{"pkg", "services/web", "e2e"}, UID: 65532, Port: 8080}

func TestInstructions(t *testing.T) {
	ins := Instructions(good)
	if got := ins[5]; !strings.HasPrefix(got, "RUN go work edit -dropuse=./e2e  && for m in pkg services/web; do") {
		t.Errorf("got %q; want the continued RUN joined", got)
	}
	if len(ins) != 14 {
		t.Errorf("got %d instructions; want 14", len(ins))
	}
}

func TestCheckAccepts(t *testing.T) {
	if err := Check(good, want); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           func(*Want)
		msg            string
	}{
		{"other builder", "FROM golang:1.27 AS build", "FROM golang:1.25 AS build", nil, `no instruction matches ^FROM golang:1\.27`},
		{"other toolchain", "GOTOOLCHAIN=go1.27.3", "GOTOOLCHAIN=local", nil, `no instruction matches ^ENV .*\bGOTOOLCHAIN=go1\.27\.3\b`},
		{"no ARG", "ARG SERVICE\n", "", nil, "no instruction matches ^ARG SERVICE$"},
		{"no cgo", "CGO_ENABLED=1", "CGO_ENABLED=0", nil, "CGO_ENABLED=1"},
		{"no trimpath", "go build -trimpath ", "go build ", nil, "no instruction matches ^RUN go build -trimpath"},
		{"unstripped", `-ldflags="-s -w" `, "", nil, "no instruction matches ^RUN go build -trimpath"},
		{"no libssl in the runtime", "base-debian12:nonroot", "static-debian12:nonroot", nil, "distroless"},
		{"root", "USER 65532:65532", "USER root", nil, "no instruction matches ^USER 65532:65532$"},
		{"other uid", "", "", func(w *Want) { w.UID = 1000 }, "no instruction matches ^USER 1000:1000$"},
		{"other port", "EXPOSE 8080", "EXPOSE 80", nil, "no instruction matches ^EXPOSE 8080$"},
		{"shell entrypoint", `ENTRYPOINT ["/app"]`, "ENTRYPOINT /app", nil, "does not end with ENTRYPOINT"},
		{"module not copied", "", "", func(w *Want) { w.Modules = append(w.Modules, "tools") }, "go.work uses tools, which is neither copied"},
		{"module not dropped", "-dropuse=./e2e", "-dropuse=./e2e-tests", nil, "go.work uses e2e, which is neither copied"},
		{"module not downloaded", "for m in pkg services/web;", "for m in pkg;", nil, "services/web/go.mod is copied but its modules are not downloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := good
			if tc.old != "" {
				if !strings.Contains(good, tc.old) {
					t.Fatalf("test edit %q does not apply", tc.old)
				}
				text = strings.Replace(good, tc.old, tc.new, 1)
			}
			w := want
			w.Modules = append([]string(nil), want.Modules...)
			if tc.want != nil {
				tc.want(&w)
			}
			err := Check(text, w)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v; want an error containing %q", err, tc.msg)
			}
		})
	}
}
