"""Small envs for the property-test kit's own tests: one correct, several with planted bugs."""
