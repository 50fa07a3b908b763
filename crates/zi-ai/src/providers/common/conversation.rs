//! A replayed conversation in the messages of an API that wants the results of one turn's tool
//! calls together in one user message (Anthropic's `tool_result` blocks, Google's function
//! responses).

/// The vendor's messages so far and the tool-result blocks not yet sent.
pub(crate) struct Conversation<M, B> {
    messages: Vec<M>,
    results: Vec<B>,
    message: fn(&'static str, Vec<B>) -> M,
}

impl<M, B> Conversation<M, B> {
    /// `message` builds one vendor message from its role and blocks.
    pub(crate) fn new(message: fn(&'static str, Vec<B>) -> M) -> Self {
        Conversation {
            messages: Vec::new(),
            results: Vec::new(),
            message,
        }
    }

    /// A block of a tool result: it waits for the next message, with the turn's other results.
    pub(crate) fn tool_result(&mut self, block: B) {
        self.results.push(block);
    }

    /// The pending tool results as one user message, then a message of `role` (left out when
    /// `blocks` is empty: the API rejects empty messages).
    pub(crate) fn push(&mut self, role: &'static str, blocks: Vec<B>) {
        self.flush();
        if !blocks.is_empty() {
            self.messages.push((self.message)(role, blocks));
        }
    }

    /// Every message, the pending tool results last.
    pub(crate) fn finish(mut self) -> Vec<M> {
        self.flush();
        self.messages
    }

    fn flush(&mut self) {
        if !self.results.is_empty() {
            let results = std::mem::take(&mut self.results);
            self.messages.push((self.message)("user", results));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> Conversation<(&'static str, Vec<u8>), u8> {
        Conversation::new(|role, blocks| (role, blocks))
    }

    #[test]
    fn consecutive_tool_results_share_one_user_message() {
        let mut c = conversation();
        c.push("assistant", vec![1]);
        c.tool_result(2);
        c.tool_result(3);
        c.push("assistant", vec![4]);
        c.tool_result(5);
        assert_eq!(
            c.finish(),
            vec![
                ("assistant", vec![1]),
                ("user", vec![2, 3]),
                ("assistant", vec![4]),
                ("user", vec![5]),
            ]
        );
    }

    #[test]
    fn an_empty_message_only_sends_the_pending_results() {
        let mut c = conversation();
        c.tool_result(1);
        c.push("user", Vec::new());
        c.push("user", Vec::new());
        assert_eq!(c.finish(), vec![("user", vec![1])]);
    }
}
