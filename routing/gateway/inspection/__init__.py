"""The gateway's inspection views: explain (what a request would be routed to, and why), the live state and the
limits as the admin shows them."""
