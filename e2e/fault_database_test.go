package e2e

import (
	"testing"
	"time"
)

// TestFaultDatabaseRestart: PostgreSQL "restarts" under load — every
// connection of every service dropped, new ones refused for 4 s, then
// accepted again (the TCP proxy in front of the shared server).
func TestFaultDatabaseRestart(t *testing.T) {
	requireFaultSuite(t)
	c := startFaultCluster(t, 0)
	l := c.startLoad()
	down := time.Now()
	c.db.down()
	time.Sleep(4 * time.Second)
	up := time.Now()
	c.db.up()
	l.awaitRecovery("recovery from PostgreSQL accepting again", up)
	l.finish(down, up)
	l.requireStatuses("PostgreSQL down, until recovered", down, time.Now(), "200", "302", "503")
}
