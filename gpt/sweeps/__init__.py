"""What a sweep found: the report, the capability matrix, its plots and the expected time."""
