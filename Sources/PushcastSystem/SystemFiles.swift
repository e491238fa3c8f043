import PushcastCore

/// Real files, as a `FileStorage`: what the CLI hands the engine (`Machine.real.files`).
public struct SystemFiles: FileStorage {
    public init() {}

    public func openForReading(_ path: String) throws(SystemError) -> any ReadableFile {
        try InputFile(path: path)
    }

    public func createForAppending(_ path: String, bufferBytes: Int, append: Bool, dropsSyncedPages: Bool) throws(SystemError)
        -> any AppendableFile
    {
        try OutputFile(path: path, bufferBytes: bufferBytes, append: append, dropsSyncedPages: dropsSyncedPages)
    }

    public func openJournal(_ path: String) throws(SystemError) -> any JournalStorage {
        try JournalFile(path: path)
    }

    public func makeScratch(in directory: String) throws(SystemError) -> any ScratchStorage {
        try ScratchFile(directory: directory)
    }

    public func readWholeFile(_ path: String) throws(SystemError) -> [UInt8]? {
        try PushcastSystem.readWholeFile(path)
    }

    public func size(_ path: String) -> Int? { FileSystem.size(path) }

    public func exists(_ path: String) -> Bool { FileSystem.exists(path) }

    public func truncate(_ path: String, to size: Int) throws(SystemError) {
        try truncateFile(path, to: size)
    }
}
