"""Stand-ins the eval tests share."""


class UnloadedLlama:
    """What ``llama_cpp.Llama`` gives, without reading a model file: the options it was built with."""

    def __init__(self, **options):
        self.options = options

    def close(self):
        pass
