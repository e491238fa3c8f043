// PushcastInput: streaming token-file readers (placeholder until the first file lands).
