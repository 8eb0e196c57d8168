"""SQL helpers of the spec stage: canonical forms, predicates, query scopes, statement safety."""
