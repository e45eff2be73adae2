"""The foundation: units, seeding, errors, the array backend."""
