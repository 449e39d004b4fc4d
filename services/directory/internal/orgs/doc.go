// Package orgs owns the organization aggregate (organizations, their
// primary domain, password and lockout policy, and members) and the
// instance aggregate (instance-wide members such as IAM_OWNER): the events,
// their reducers into the orgs, org_members and instance_members
// projections, the commands that produce them and the queries that read them.
package orgs
