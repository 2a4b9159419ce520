"""The gateway's Django project."""
