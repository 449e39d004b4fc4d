package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// Report is one run.
type Report struct {
	Commit string `json:"commit"` // git HEAD of the tree that was measured
	// Dirty is true when the tree had uncommitted changes to tracked files:
	// then Commit is not exactly what was measured.
	Dirty         bool     `json:"dirty"`
	Date          string   `json:"date"` // start of the run, RFC 3339, UTC
	Machine       Machine  `json:"machine"`
	Concurrency   int      `json:"concurrency"`
	Requests      int      `json:"requests"`       // measured requests per scenario
	LoginRequests int      `json:"login_requests"` // measured logins of the login scenario
	Floor         []Floor  `json:"floor"`
	Results       []Record `json:"results"`
	// SeedSeconds is how long make bench-scale took to seed its rows.
	SeedSeconds float64 `json:"seed_seconds,omitempty"`
	// Problems lists what makes the run incomplete or its figures doubtful:
	// modes cut short or skipped, scenarios not measured, failed requests.
	Problems []string `json:"problems"`
}

// Machine is where the run happened; other work on it skews every figure.
type Machine struct {
	CPUs         int    `json:"cpus"`
	CPUModel     string `json:"cpu_model,omitempty"`
	MemoryMB     int64  `json:"memory_mb,omitempty"`
	Kernel       string `json:"kernel,omitempty"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	Go           string `json:"go"` // the benchmark tool's Go release
	LoadAvgStart string `json:"load_avg_start"`
	LoadAvgEnd   string `json:"load_avg_end"`
}

// Floor is the in-process cost of one operation (see package floor): the
// mean of the measurements before and after the servers ran.
type Floor struct {
	Operation string  `json:"operation"` // "RS256 sign", "argon2id verify", ...
	Library   string  `json:"library"`   // "go" or "openssl"
	Detail    string  `json:"detail"`
	USPerOp   float64 `json:"us_per_op"`
}

// Record is one scenario measured in one mode.
type Record struct {
	Scenario  string  `json:"scenario"`  // a stable name: token-rs256, ..., login
	Mode      string  `json:"mode"`      // embedded or distributed
	Algorithm string  `json:"algorithm"` // the server's GATEHOUSE_SIGNING_ALGORITHM
	Requests  int     `json:"requests"`  // measured (a login counts once)
	Errors    int     `json:"errors"`
	RPS       float64 `json:"rps"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	// CPUUSPerReq is the CPU of every server process per request, in µs:
	// the sum of CPUUSByProcess.
	CPUUSPerReq    float64            `json:"cpu_us_per_req"`
	CPUUSByProcess map[string]float64 `json:"cpu_us_by_process"`
	// RSSMBByProcess is each process's resident set size after the
	// scenario, in MiB; PostgreSQL's processes share their memory and are
	// left out.
	RSSMBByProcess map[string]float64 `json:"rss_mb_by_process"`
	SigningLibrary *Library           `json:"signing_library,omitempty"`
	// HashUSPerReq is, for login, the argon2id password check as the
	// server counts it (or, from an older server, measured in-process with
	// its parameters); OtherUSPerReq the rest of the login's server CPU.
	HashUSPerReq  *float64 `json:"hash_us_per_req,omitempty"`
	OtherUSPerReq *float64 `json:"other_us_per_req,omitempty"`
	// Rows and Users are the stored access and refresh tokens and the
	// users when the scenario ran (make bench-scale only).
	Rows  *int64 `json:"rows,omitempty"`
	Users *int64 `json:"users,omitempty"`
	// Targets are the budgets that apply to this scenario in this mode,
	// each with the measured value and whether it was met.
	Targets []Target `json:"targets"`
	// FloorOperation names the floor (Report.Floor) the scenario compares
	// with, and RatioToFloor is CPUUSPerReq over it: a figure that holds
	// from one day to the next where the machine's speed does not
	// (see FloorFor).
	FloorOperation string  `json:"floor_operation,omitempty"`
	RatioToFloor   float64 `json:"ratio_to_floor,omitempty"`
}

// FloorFor is the floor operation a scenario in a mode compares with: the
// signature it makes with the library it signs with (token-rs256,
// token-es256), the argon2id check (login, login-totp), and otherwise what any request
// costs before Gatehouse's own work: a bare net/http server (embedded) or
// a bare reverse proxy in front of one (distributed, through edge).
func FloorFor(scenario, mode, library string) (operation, lib string) {
	if library == "" {
		library = "go"
	}
	switch scenario {
	case "token-rs256":
		return "RS256 sign", library
	case "token-es256":
		return "ES256 sign", library
	case "login", "login-totp":
		return "argon2id verify", "go"
	}
	if mode == "distributed" {
		return "reverse proxy", "go"
	}
	return "HTTP server", "go"
}

// SetRatios fills every record's floor and ratio from r.Floor (a record
// whose floor was not measured keeps none).
func (r *Report) SetRatios() {
	for i := range r.Results {
		rec := &r.Results[i]
		lib := ""
		if rec.SigningLibrary != nil {
			lib = rec.SigningLibrary.Library
		}
		op, lib := FloorFor(rec.Scenario, rec.Mode, lib)
		for _, f := range r.Floor {
			if f.Operation == op && f.Library == lib && f.USPerOp > 0 {
				rec.FloorOperation = op + " (" + lib + ")"
				rec.RatioToFloor = Round(rec.CPUUSPerReq / f.USPerOp)
			}
		}
	}
}

// Target is one budget of a record: Value (the measured figure) must not
// exceed Limit, both in Unit ("us" of server CPU per request, or "MB").
type Target struct {
	Name  string  `json:"target"`
	Unit  string  `json:"unit"`
	Limit float64 `json:"limit"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

// Library is what the server signs with, from its
// gatehouse_tokens_signing_library gauge.
type Library struct {
	Library string `json:"library"` // "openssl" or "go"
	Version string `json:"version"`
}

// Missing names each scenario of names that has no record in a mode of
// modes, as "scenario (mode)".
func (r Report) Missing(names, modes []string) []string {
	have := map[[2]string]bool{}
	for _, rec := range r.Results {
		have[[2]string{rec.Scenario, rec.Mode}] = true
	}
	var out []string
	for _, m := range modes {
		for _, n := range names {
			if !have[[2]string{n, m}] {
				out = append(out, n+" ("+m+")")
			}
		}
	}
	return out
}

// Write stores r at path as indented JSON, creating the directory; the
// file is replaced at once, so a reader never sees half of it.
func (r Report) Write(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".results-*.json")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(append(raw, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write results %s: %w", path, err)
	}
	return nil
}

// US is d in microseconds, to 0.1 µs.
func US(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 10) }

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 1000) }

// MB is a size in bytes in MiB, to 0.1 MiB.
func MB(bytes int64) float64 { return round(float64(bytes)/(1<<20), 10) }

// Round is v to 0.1.
func Round(v float64) float64 { return round(v, 10) }

func round(v, per float64) float64 { return math.Round(v*per) / per }
