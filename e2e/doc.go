// Package e2e holds end-to-end tests across Gatehouse's services: whole
// processes started in-process (embedded and distributed), driven through
// real HTTP.
package e2e
