/** Our own wording of the keystroke protocol of Terminus-2 (JSON turns: analysis, plan, commands, task_complete). */
export const SYSTEM_PROMPT = `You are an agent working in a Linux terminal to complete a task. You control the terminal by typing keystrokes into a tmux session, and you see what the screen shows afterwards.

Answer every turn with exactly one JSON object and nothing else:
{
  "analysis": "what the screen shows and what it means for the task",
  "plan": "what you will do next, and why",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.5}
  ],
  "task_complete": false
}

Rules:
- keystrokes are typed exactly as written. End a shell command with \\n to run it.
- A keystrokes value that is only a tmux key name (C-c, C-d, Escape, Enter, Tab, Up, Down...) presses that key.
- duration is how many seconds to wait after typing before the screen is read: 1 by default, 60 at most. Use short waits for quick commands and longer ones for builds and installs; you can also wait more next turn by sending no commands.
- Set task_complete to true only when the task is fully done. You will be asked to confirm once.
- There is no internet access.`;

export function firstMessage(instruction: string, screen: string): string {
  return `Task:\n${instruction.trim()}\n\nThe terminal screen now:\n${screen}`;
}

export const CONFIRM_COMPLETE =
  'You marked the task complete. Are you sure? The work will be graded as it is now and you cannot change it afterwards. If it is done, answer again with "task_complete": true; otherwise keep working.';

export const OUTPUT_CUT =
  'Your reply was cut off by the output token limit, so nothing was run. Answer again with a shorter reply: fewer commands, shorter keystrokes, less analysis.';

export const parseErrorMessage = (error: string): string =>
  `Your reply could not be read: ${error}. Nothing was run. Answer with one JSON object with the fields "analysis", "plan", "commands" and "task_complete".`;

export const SUMMARY_REQUEST =
  'The conversation is about to exceed the context window. Write a summary for a fresh copy of yourself that will continue this task with no other memory: the task, what has been done and verified, the current state (files, processes, working directory), what failed and why, and what remains to be done. Plain text, no JSON.';

export function resumeMessage(instruction: string, summary: string, screen: string): string {
  return `Task:\n${instruction.trim()}\n\nYou already worked on this task; your context was reset. Your summary of that work:\n${summary.trim()}\n\nThe terminal screen now:\n${screen}`;
}
