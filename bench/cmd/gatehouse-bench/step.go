package main

import (
	"fmt"
	"math"

	"github.com/gatehouse-id/gatehouse/bench/internal/suite"
)

// stepEstimate is login-totp's server CPU besides the password hash over
// login's, measured in the same run (issue 26's target).
//
// Ratio, the target's figure, divides each scenario's CPU besides the hash
// by its own hash CPU first. The hash is a fixed amount of work on the
// same processes in the same rounds, so this cancels the machine's speed:
// in 60 alternating rounds of one run (bench/README, "Since 38e7b35") a
// round's CPU besides the hash followed its hash CPU with a slope of 0.95
// distributed (0.65 embedded), while the hash itself moved by ±9–11% from
// round to round; Raw, the rests' plain ratio, carries that movement.
type stepEstimate struct {
	Ratio     float64 // (totp rest / totp hash) / (login rest / login hash)
	Raw       float64 // totp rest / login rest, per login
	HashRatio float64 // totp's hash per login / login's
	// Lo and Hi bound Ratio's 95% interval, from leaving out one round
	// of both scenarios at a time (the jackknife) with Student's t; both
	// are 0 with fewer than three rounds of each.
	Lo, Hi float64
	Rounds int
}

// estimateStep estimates the step from login's and login-totp's rows; ok
// is false unless the server counted both scenarios' CPU and hashes.
func estimateStep(login, totp suite.Row) (stepEstimate, bool) {
	if !login.CPUKnown || !totp.CPUKnown || !login.HashKnown || !totp.HashKnown ||
		login.Result.Requests == 0 || totp.Result.Requests == 0 {
		return stepEstimate{}, false
	}
	ratio, ok := normalized(sums(login.Rounds, -1, login), sums(totp.Rounds, -1, totp))
	if !ok {
		return stepEstimate{}, false
	}
	loginRest := float64(login.CPUPerRequest() - login.HashPerRequest())
	e := stepEstimate{
		Ratio:     ratio,
		Raw:       float64(totp.CPUPerRequest()-totp.HashPerRequest()) / loginRest,
		HashRatio: float64(totp.HashPerRequest()) / float64(login.HashPerRequest()),
	}
	n := len(login.Rounds)
	if n != len(totp.Rounds) || n < 3 {
		return e, true
	}
	// The jackknife over paired rounds: round i of each left out.
	leftOut := make([]float64, n)
	var mean float64
	for i := range n {
		v, ok := normalized(sums(login.Rounds, i, login), sums(totp.Rounds, i, totp))
		if !ok {
			return e, true
		}
		leftOut[i] = v
		mean += v / float64(n)
	}
	var ss float64
	for _, v := range leftOut {
		ss += (v - mean) * (v - mean)
	}
	half := studentT975(n-1) * math.Sqrt(float64(n-1)/float64(n)*ss)
	e.Lo, e.Hi, e.Rounds = ratio-half, ratio+half, n
	return e, true
}

// roundSum is the CPU and hash CPU of a scenario's rounds.
type roundSum struct{ cpu, hash float64 }

// sums adds up rounds but the one at skip (-1: none); a row without rounds
// (a server that counted no rounds apart) is its totals.
func sums(rounds []suite.Round, skip int, r suite.Row) roundSum {
	if len(rounds) == 0 {
		return roundSum{float64(r.CPU), float64(r.HashCPU)}
	}
	var s roundSum
	for i, rd := range rounds {
		if i != skip {
			s.cpu += float64(rd.CPU)
			s.hash += float64(rd.HashCPU)
		}
	}
	return s
}

// normalized is (totp's CPU besides the hash / its hash) over login's.
func normalized(login, totp roundSum) (float64, bool) {
	if login.hash <= 0 || totp.hash <= 0 || login.cpu <= login.hash || totp.cpu <= totp.hash {
		return 0, false
	}
	return ((totp.cpu - totp.hash) / totp.hash) / ((login.cpu - login.hash) / login.hash), true
}

// studentT975 is the 97.5th percentile of Student's t with df degrees of
// freedom (two-sided 95%).
func studentT975(df int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch {
	case df < 1:
		return math.Inf(1)
	case df < len(table):
		return table[df]
	}
	return 1.96 + 2.4/float64(df) // within 0.002 of the exact value beyond 30
}

// stepNote gives the step's estimate: the target's figure with its
// interval, and the plain ratio of the rests beside it. "" unless the
// server counted both scenarios' hashes.
func stepNote(same map[string]suite.Row) string {
	login, ok := same[string(suite.Login)]
	totp, ok2 := same[string(suite.LoginTOTP)]
	if !ok || !ok2 {
		return ""
	}
	e, ok := estimateStep(login, totp)
	if !ok {
		return ""
	}
	interval := ""
	if e.Rounds > 0 {
		interval = fmt.Sprintf(" (95%%: %.3f–%.3f over %d rounds)", e.Lo, e.Hi, e.Rounds)
	}
	return fmt.Sprintf("login-totp's CPU besides the hash over login's, each first divided by its own hash CPU (the target's figure): %.3f%s; "+
		"the rests alone: %.3f (the hash cost login-totp %.3f × login's: the machine's speed moves both)",
		e.Ratio, interval, e.Raw, e.HashRatio)
}
