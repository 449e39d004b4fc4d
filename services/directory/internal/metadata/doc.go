// Package metadata owns user metadata: key/value entries attached to a user.
// Its events (users.EventMetadataSet, users.EventMetadataRemoved) belong to
// the user aggregate, so a metadata change is ordered with every other
// change of the user and checked against the user's version. It owns the
// reducers of those events into the user_metadata projection (and the user
// row's change_date, sequence and version), the rules entries obey, the
// commands that produce the events and the queries that read entries.
// It depends on eventstore, users (the aggregate) and apierr (rule
// violations are the management API's InvalidArgument and NotFound).
package metadata
