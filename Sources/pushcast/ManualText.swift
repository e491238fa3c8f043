import PushcastCommandLine

/// What `pushcast help --man` says beyond the command and option tables, which it renders from
/// the same specs `pushcast help` prints. The committed docs/pushcast.1 is this page;
/// regenerate it with `.build/debug/pushcast help --man > docs/pushcast.1` after changing an
/// option (ManualPageTests fails until then).
enum ManualText {
    static let page = ManualPage(
        source: "pushcast \(VersionCommand.version)",
        description: [
            "pushcast sends one push campaign to every device token of a CSV or NDJSON export, or of a "
                + "database query, over HTTP/2 to Apple Push Notification service (APNs) and Firebase Cloud "
                + "Messaging (FCM HTTP v1). Each row goes to the provider its platform or provider column names. "
                + "It writes one results line per input row, a prune file of dead and invalid tokens, and a "
                + "summary.",
            "A campaign survives signals, crashes and a full disk: the journal beside the results file "
                + "lets send --resume, with the same command line, finish it without sending any row twice. "
                + "--retry-unknown also resends the rows whose fate is unknown, which may deliver those "
                + "notifications twice.",
            "The input formats, the results, prune and summary files, the metrics and the mock server's "
                + "behaviours are described in docs/USAGE.md of the source tree.",
        ],
        exitStatus: [
            ManualItem("0", "Done: every row is delivered, pruned, invalid or duplicate (bench: every request succeeded; "
                + "merge: every input row appears exactly once)."),
            ManualItem("1", "Done, but some rows are failed or unknown (merge: rows are missing; simulate: a seed broke an invariant)."),
            ManualItem("2", "Could not start or had to stop: a bad option, an unreadable file or key, a template error, "
                + "a TLS or ALPN failure, an unreachable or broken server, a rejected credential, a database error."),
            ManualItem("3", "Interrupted, resumable: a signal, a full disk, or a server that answered and then broke "
                + "stopped the run; send --resume with the same command line goes on."),
        ],
        environment: [
            ManualItem("GOOGLE_APPLICATION_CREDENTIALS", "The FCM service-account file when --fcm-payload is given without --fcm-credentials."),
            ManualItem("PGPASSWORD, MYSQL_PWD", "The database password for --from and prune-apply, unless --db-password-env names another variable."),
            ManualItem("JOB_COMPLETION_INDEX", "The shard index of --shard auto/N in a Kubernetes Indexed Job."),
            ManualItem("SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT", "The shard index and count of --shard auto in a Slurm job array."),
            ManualItem("SSL_CERT_DIR", "The hashed directory of trusted CA certificates (default /etc/ssl/certs); --ca-file adds to it."),
            ManualItem("TMPDIR", "Where the duplicate plan's and merge's unlinked scratch files go (merge: unless --tmpdir)."),
        ],
        seeAlso: ["h2load(1)", "nghttpd(1)", "README.md", "docs/USAGE.md", "docs/OPERATIONS.md", "docs/DATABASES.md"])
}
