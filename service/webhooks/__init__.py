"""Webhook fan-out: Standard Webhooks signatures, a transactional outbox, a dispatcher."""
