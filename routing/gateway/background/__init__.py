"""The gateway's background tasks: probes of cooling and locked-out targets and target health shared through Redis."""
