"""The audit delivery pipeline: a request's event from the gateway process to the audit database.

The event is validated and redacted (``event``, ``redact``), written encrypted to the process's journal
(``journal``, read back past damage by ``journal_records``, replayed after a crash by ``journal_recovery``),
batched by the publisher thread (``publisher``, ``batch_publisher``) to a sink (``sinks``: Celery or the database
directly), and kept in the spool (``spool``) while the sink is unreachable.
"""
