"""Framework-neutral run_ut machinery: read API cases, random data, CSV reports with resume, workers."""
