// PushcastCommandLine: placeholder until the first file lands.
