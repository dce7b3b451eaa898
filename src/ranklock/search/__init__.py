"""Search: SQL for the branches, fusion, filters, results."""
