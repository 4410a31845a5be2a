"""Inference engines. Every engine speaks one protocol (see `base.Engine`); over HTTP that
protocol is SGLang's native API, served by SGLang itself on GPUs and by our embedded
transformers engine on CPU."""
