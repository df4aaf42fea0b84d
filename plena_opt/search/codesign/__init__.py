"""Hardware × plan co-design: design space files, the outer study, the joint front."""
