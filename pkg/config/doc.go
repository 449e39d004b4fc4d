// Package config loads and validates the GATEHOUSE_* environment variables
// shared by every Gatehouse process. Load reports every problem at once, each
// naming its variable, so a misconfigured process stops before it starts
// anything (main exits with status 2).
package config
