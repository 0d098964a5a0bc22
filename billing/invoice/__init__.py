"""Monthly invoices from hourly rollups: `periods` (UTC months), `pricing` (dimensions, plans,
the rounding rule), `issue` (drafts, final invoices, adjustments, provenance)."""
