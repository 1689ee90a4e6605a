"""The error every claim check raises: a claim of the family YAML that does not hold on the model."""


class ClaimError(AssertionError):
    """A claim of the family YAML does not hold on the model; the message names the claim."""

    def __init__(self, family: str, claim: str, problem: str):
        self.family, self.claim = family, claim
        super().__init__(f"{family}: claim {claim}: {problem}")
