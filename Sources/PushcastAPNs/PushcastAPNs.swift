// PushcastAPNs: APNs request encoding, JWT and reason tables (placeholder until the first file lands).
