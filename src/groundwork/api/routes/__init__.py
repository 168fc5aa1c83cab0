"""One router per resource; each route is a thin layer over pipeline/domain/jobs."""
