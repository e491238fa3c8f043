/// A failed file, process or environment call (PushcastSystem's, or a storage a test or the
/// simulator provides), named together with what the kernel said.
public struct SystemError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
