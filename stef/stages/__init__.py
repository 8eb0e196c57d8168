"""The pipeline stages, one module each, one public function named after the module."""
